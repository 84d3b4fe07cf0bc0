"""nbgrader for a student's server on the class hub: where assignments are fetched from and submitted to."""

import os

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "attn-notebooks"
c.Exchange.root = os.environ.get("ATTN_CLASS_EXCHANGE", "/srv/nbgrader/exchange")
