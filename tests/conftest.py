"""Shared test configuration: hypothesis profiles, a headless matplotlib backend, one torch thread.

Profiles: ``ci`` (200 examples per property) is selected when the ``CI`` environment variable is
set, otherwise ``dev`` (50 examples). ``HYPOTHESIS_PROFILE`` overrides both. Deadlines are off:
the first call of a torch op can be slow, and a timing limit would only add flakiness.
"""

import os

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# The tensors in these tests are tiny; intra-op threads only add overhead. Measured with CI=1 on a
# 2-core machine: about 5-8 s of test time with one thread against 22-34 s with the default two.
torch.set_num_threads(1)

settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "dev",
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
