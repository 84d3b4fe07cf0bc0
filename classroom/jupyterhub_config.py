"""JupyterHub 6.1.1 for a class on one machine (issue #35), in the shape of The Littlest JupyterHub.

`jupyterhub -f classroom/jupyterhub_config.py` (as root; see classroom/README.md). Local Unix users log in with PAM, one
process spawner starts each user's JupyterLab, idle servers are culled, nbgitpuller delivers the series on every
spawn, nbgrader's extensions give students the assignment list and the instructor the formgrader, and one shared,
read-only converted-model cache (ATTN_CORE_CACHE) serves the whole class. Everything site-specific comes from
environment variables with defaults under /srv/attn-class, so the file loads with no PAM user and no network:

  ATTN_CLASS_DIR          /srv/attn-class         state: hub database, cookie secret
  ATTN_CLASS_REPO         $ATTN_CLASS_DIR/attn-notebooks.git   the series, as a git URL or local path nbgitpuller pulls
  ATTN_CLASS_BRANCH       main
  ATTN_CLASS_CACHE        $ATTN_CLASS_DIR/cache   converted Gemma 3, built once by the instructor
  ATTN_CLASS_EXCHANGE     /srv/nbgrader/exchange  nbgrader's exchange (mode 1777)
  ATTN_CLASS_INSTRUCTORS  instructor              comma-separated: hub admins, formgrader users
  ATTN_CLASS_CULL_S       3600                    idle seconds before a server is stopped
"""

import os
import shutil
import sys
from pathlib import Path
from urllib.parse import urlencode

c = get_config()  # noqa: F821 (JupyterHub's config loader defines it)
HERE = Path(__file__).resolve().parent
STATE = Path(os.environ.get("ATTN_CLASS_DIR", "/srv/attn-class"))
REPO = os.environ.get("ATTN_CLASS_REPO", str(STATE / "attn-notebooks.git"))
BRANCH = os.environ.get("ATTN_CLASS_BRANCH", "main")
CACHE = os.environ.get("ATTN_CLASS_CACHE", str(STATE / "cache"))
EXCHANGE = os.environ.get("ATTN_CLASS_EXCHANGE", "/srv/nbgrader/exchange")
INSTRUCTORS = {name.strip() for name in os.environ.get("ATTN_CLASS_INSTRUCTORS", "instructor").split(",") if name}
CULL_S = int(os.environ.get("ATTN_CLASS_CULL_S", "3600"))

# The state folder and nbgrader's exchange exist before the hub writes its cookie secret (a hub run as root creates
# them; elsewhere the hub's own defaults in the working directory stay).
for folder, mode in ((STATE, 0o755), (Path(EXCHANGE), 0o1777)):  # 1777: every student writes submissions there
    if not folder.exists():
        try:
            folder.mkdir(parents=True)
            folder.chmod(mode)
        except OSError:
            pass

# --- hub, proxy, state ------------------------------------------------------------------------------------------------
c.JupyterHub.bind_url = "http://:80"  # behind a TLS terminator in production (README); tests override ports
if os.access(STATE, os.W_OK):
    c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.cleanup_servers = True
# The proxy: configurable-http-proxy's command line, here the pure-Python package pinned in requirements.txt (npm's
# `configurable-http-proxy` works the same). Found next to this Python, so a hub started without the venv on PATH works.
_proxy = Path(sys.executable).with_name("configurable-http-proxy")
c.ConfigurableHTTPProxy.command = [
    str(_proxy) if _proxy.exists() else shutil.which("configurable-http-proxy") or "configurable-http-proxy"
]
# 100 students arriving at 9:00: start at most 20 servers at once (each imports torch), never more than 110 running.
c.JupyterHub.concurrent_spawn_limit = 20
c.JupyterHub.active_server_limit = 110

# --- who logs in ------------------------------------------------------------------------------------------------------
c.JupyterHub.authenticator_class = "pam"  # the machine's Unix accounts, as TLJH; OAuth works the same way (README)
c.Authenticator.admin_users = INSTRUCTORS
c.Authenticator.allow_all = True  # every account on the class machine is a student or an instructor
c.LocalAuthenticator.create_system_users = True  # users an admin adds in the hub get a Unix account

# --- one spawner, one JupyterLab per user ----------------------------------------------------------------------
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = ["jupyterhub-singleuser"]
c.Spawner.notebook_dir = "~"
c.Spawner.start_timeout = 120  # torch's import on a busy machine
c.Spawner.http_timeout = 90
c.Spawner.mem_limit = "2G"  # advisory for this spawner (classroom/README.md: memory per student); enforced on k8s
# Every spawn pulls the series (nbgitpuller merges, never overwrites a student's edits) and opens notebook 00.
c.Spawner.default_url = "/git-pull?" + urlencode(
    {
        "repo": REPO,
        "branch": BRANCH,
        "targetpath": "attn-notebooks",
        "urlpath": "lab/tree/attn-notebooks/notebooks/00_start_here.ipynb",
    }
)


def per_role_environment(spawner):
    """Students and instructors get their own Jupyter config folder (classroom/hub/): nbgrader's exchange and course,
    which extensions load, and the formgrader's iframe header for instructors only."""
    instructor = spawner.user.name in INSTRUCTORS or spawner.user.admin
    spawner.environment.update(
        {
            "JUPYTER_CONFIG_PATH": str(HERE / "hub" / ("instructor" if instructor else "student")),
            "ATTN_CORE_CACHE": CACHE,  # one converted Gemma 3 for the class, not 1.1 GB per home
            "ATTN_CLASS_EXCHANGE": EXCHANGE,
            "MPLBACKEND": "module://matplotlib_inline.backend_inline",
            "OMP_NUM_THREADS": "1",  # 100 kernels on one machine: one thread each, no oversubscription
        }
    )
    if instructor and os.environ.get("ATTN_CLASS_COURSE"):
        spawner.environment["ATTN_CLASS_COURSE"] = os.environ["ATTN_CLASS_COURSE"]  # else ~/attn-course


c.Spawner.pre_spawn_hook = per_role_environment

# --- idle culling (TLJH runs the same service) -----------------------------------------------------------------------
c.JupyterHub.services = [
    {
        "name": "idle-culler",
        "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={CULL_S}", "--cull-every=300"],
    }
]
c.JupyterHub.load_roles = [
    {
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    }
]
