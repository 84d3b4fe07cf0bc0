"""nbgrader for the instructor's server on the class hub: the course built by classroom/build_course.py."""

import os
from pathlib import Path

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "attn-notebooks"
c.CourseDirectory.root = os.environ.get("ATTN_CLASS_COURSE", str(Path.home() / "attn-course"))
c.Exchange.root = os.environ.get("ATTN_CLASS_EXCHANGE", "/srv/nbgrader/exchange")
