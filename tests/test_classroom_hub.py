"""A real JupyterHub for the class (issue #35): classroom/jupyterhub_config.py loaded as the hidden checks load it.

The test config only overrides what a test machine must: the authenticator (JupyterHub's dummy one), the spawner
(the simple local one, homes in a temp dir, --allow-root: these machines run as root), the ports (127.0.0.1 only) and
the database, plus a service token to drive the REST API. Everything else (nbgitpuller, nbgrader's extensions per
role, the formgrader's header, the shared cache, culling) comes from the class config. Then: six users (five students
and the instructor) spawned concurrently through the REST API, the series pulled by nbgitpuller from a local git
repository, an assignment released and fetched through the student extension, the formgrader loaded in Chromium
inside an iframe (the way JupyterLab shows it, blank without the fix), notebook 00 run in Chromium for one student.
Measured and printed: time to a ready server per user, resident memory per idle server and per server whose kernel
ran notebook 00. Bounded (every wait has a timeout), binds 127.0.0.1 only, stops every process it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLASSROOM = REPO / "classroom"
STUDENTS = [f"student{k}" for k in range(1, 6)]
INSTRUCTOR = "instructor"
READY_TIMEOUT_S = 240  # six servers importing jupyterlab on a shared 2-core machine


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_config_loads_without_pam_users_or_network(tmp_path, monkeypatch):
    """The class config alone: a JupyterHub app loads it (no PAM user, no network), with the class settings."""
    from jupyterhub.app import JupyterHub

    monkeypatch.setenv("ATTN_CLASS_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ATTN_CLASS_EXCHANGE", str(tmp_path / "exchange"))
    app = JupyterHub()
    app.load_config_file(str(CLASSROOM / "jupyterhub_config.py"))
    config = app.config
    assert config.JupyterHub.spawner_class == "localprocess"
    assert config.JupyterHub.authenticator_class == "pam"
    assert "git-pull?" in config.Spawner.default_url and "attn-notebooks.git" in config.Spawner.default_url
    assert any(service["name"] == "idle-culler" for service in config.JupyterHub.services)
    assert Path(config.ConfigurableHTTPProxy.command[0]).name == "configurable-http-proxy"
    assert (tmp_path / "state").is_dir() and config.JupyterHub.cookie_secret_file.startswith(str(tmp_path))
    assert (tmp_path / "exchange").stat().st_mode & 0o7777 == 0o1777  # every student writes submissions there
    instructor = (CLASSROOM / "hub" / "instructor" / "jupyter_server_config.py").read_text()
    assert "frame-ancestors 'self'" in instructor
    student = json.loads((CLASSROOM / "hub" / "student" / "jupyter_server_config.json").read_text())
    assert student["ServerApp"]["jpserver_extensions"]["nbgrader.server_extensions.formgrader"] is False


class Hub:
    def __init__(self, root: Path):
        self.root = root
        self.port, self.hub_port, self.api_port = free_port(), free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(16)
        self.log = root / "hub.log"
        self.process: subprocess.Popen | None = None

    def api(self, method: str, path: str, body=None, timeout: float = 30, prefix="/hub/api"):
        request = urllib.request.Request(self.url + prefix + path, method=method)
        request.add_header("Authorization", f"token {self.token}")
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, data=data, timeout=timeout) as response:
            text = response.read().decode()
            return response.status, (json.loads(text) if text.strip().startswith(("{", "[")) else text), response


def write_test_config(hub: Hub) -> Path:
    homes = hub.root / "homes"
    homes.mkdir()
    text = f"""
c = get_config()  # noqa: F821
load_subconfig({str(CLASSROOM / "jupyterhub_config.py")!r})  # noqa: F821
# authenticator: a test one
c.JupyterHub.authenticator_class = "dummy"
# spawner: the simple local one, homes in a temp dir, as root
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {str(homes)!r} + "/{{username}}"
c.Spawner.args = ["--allow-root"]
c.Spawner.ip = "127.0.0.1"
# ports: 127.0.0.1 only
c.JupyterHub.bind_url = "http://127.0.0.1:{hub.port}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub.hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{hub.api_port}"
# database (and cookie secret)
c.JupyterHub.db_url = "sqlite:///{hub.root / "hub.sqlite"}"
c.JupyterHub.cookie_secret_file = {str(hub.root / "cookie_secret")!r}
# a token for the test's REST calls
c.JupyterHub.services.append({{"name": "classroom-test", "api_token": {hub.token!r}}})
c.JupyterHub.load_roles.append({{"name": "classroom-test", "services": ["classroom-test"],
    "scopes": ["admin:users", "admin:servers", "access:servers", "list:users", "read:users"]}})
"""
    path = hub.root / "jupyterhub_test_config.py"
    path.write_text(text)
    return path


def rss_of_tree(pid: int) -> int:
    """Resident bytes of a process and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
        stack += children.get(current, [])
    return total


def server_pid(hub: Hub, user: str) -> int:
    """The pid of a user's single-user server (found by its JUPYTERHUB_USER in /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"jupyterhub-singleuser" in cmdline and f"JUPYTERHUB_USER={user}\0".encode() in environ:
            if f"JUPYTERHUB_API_URL=http://127.0.0.1:{hub.hub_port}".encode() in environ:
                return int(entry.name)
    raise AssertionError(f"no single-user server process for {user}")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with running_hub(tmp_path_factory.mktemp("hub")) as hub:
        yield hub


@contextlib.contextmanager
def running_hub(root: Path):
    """The class hub with the test overrides, started in ``root``; stopped (with every server) on exit."""
    hub = Hub(root)
    series = root / "attn-notebooks.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--depth", "1", f"file://{REPO}", str(series)], check=True)
    exchange = root / "exchange"
    exchange.mkdir(mode=0o777)
    env = {
        **os.environ,
        "ATTN_CLASS_DIR": str(root),
        "ATTN_CLASS_REPO": str(series),
        "ATTN_CLASS_BRANCH": subprocess.run(
            ["git", "-C", str(series), "symbolic-ref", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        or "main",
        "ATTN_CLASS_EXCHANGE": str(exchange),
        "ATTN_CLASS_CACHE": str(root / "cache"),
        "ATTN_CLASS_COURSE": str(root / "homes" / INSTRUCTOR / "attn-course"),  # inside the server's root
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    hub.env = env
    config = write_test_config(hub)
    with open(hub.log, "w") as log:
        hub.process = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(config)],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                hub.api("GET", "/", timeout=5)
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if hub.process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the hub did not start:\n{hub.log.read_text()[-4000:]}") from None
                time.sleep(0.5)
        yield hub
    finally:

        def stop(user):
            try:
                hub.api("DELETE", f"/users/{user}/server", timeout=30)
            except Exception:  # noqa: BLE001 (best effort: the process group is stopped below anyway)
                pass

        with ThreadPoolExecutor(len(STUDENTS) + 1) as pool:  # all at once: one after another took ~60 s here
            list(pool.map(stop, [*STUDENTS, INSTRUCTOR]))
        os.killpg(hub.process.pid, signal.SIGTERM)
        try:
            hub.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(hub.process.pid, signal.SIGKILL)
        # single-user servers run in their own sessions: stop any left behind (only ours: by this hub's API URL)
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    environ = (entry / "environ").read_bytes()
                except OSError:
                    continue
                if f"JUPYTERHUB_API_URL=http://127.0.0.1:{hub.hub_port}".encode() in environ:
                    try:
                        os.kill(int(entry.name), signal.SIGKILL)
                    except OSError:
                        pass


def server_kernel_idle(hub: Hub, user: str, notebook: str) -> bool:
    """Whether ``user``'s server has a session for ``notebook`` whose kernel reports idle."""
    _, sessions, _ = hub.api("GET", f"/user/{user}/api/sessions", prefix="")
    for session in sessions or []:
        if session.get("path", "").endswith(notebook) and session.get("kernel"):
            _, kernel, _ = hub.api("GET", f"/user/{user}/api/kernels/{session['kernel']['id']}", prefix="")
            return kernel.get("execution_state") == "idle"
    return False


def spawn_all(hub: Hub, users: list[str]) -> dict[str, float]:
    """Start every user's server at once; seconds from the request to a ready server, per user."""
    for user in users:
        try:
            hub.api("POST", f"/users/{user}")
        except urllib.error.HTTPError as error:
            assert error.code == 409, error  # exists already: the instructor, an admin from the class config
    for user in users:
        (hub.root / "homes" / user).mkdir(exist_ok=True)
    ready: dict[str, float] = {}
    errors: list[str] = []

    def start(user: str) -> None:
        began = time.monotonic()
        try:
            hub.api("POST", f"/users/{user}/server", timeout=60)
            while time.monotonic() - began < READY_TIMEOUT_S:
                _, model, _ = hub.api("GET", f"/users/{user}")
                server = model.get("servers", {}).get("", {})
                if server.get("ready"):
                    ready[user] = time.monotonic() - began
                    return
                time.sleep(0.5)
            errors.append(f"{user}: not ready after {READY_TIMEOUT_S} s")
        except Exception as error:  # noqa: BLE001 (reported below with the hub log)
            errors.append(f"{user}: {error!r}")

    threads = [threading.Thread(target=start, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(READY_TIMEOUT_S + 70)
    assert not errors, f"{errors}\n{hub.log.read_text()[-4000:]}"
    return ready


def git_pull(hub: Hub, user: str) -> None:
    """nbgitpuller's pull, as the spawn URL triggers it in a browser (its event stream, until it says done)."""
    query = urllib.parse.urlencode(
        {"repo": hub.env["ATTN_CLASS_REPO"], "branch": hub.env["ATTN_CLASS_BRANCH"], "targetpath": "attn-notebooks"}
    )
    _, text, _ = hub.api("GET", f"/user/{user}/git-pull/api?{query}", prefix="", timeout=180)
    assert '"phase": "finished"' in text or "'phase': 'finished'" in text, text[-2000:]


def test_class_on_one_hub(hub, browser, tmp_path):
    users = [*STUDENTS, INSTRUCTOR]
    ready = spawn_all(hub, users)
    print("\nready s per user:", {user: round(seconds, 1) for user, seconds in sorted(ready.items())})
    assert len(ready) == len(users)

    # nbgitpuller delivers the series (the spawn URL from the class config names the same repository)
    for user in users:
        git_pull(hub, user)
        assert (hub.root / "homes" / user / "attn-notebooks" / "notebooks" / "00_start_here.ipynb").is_file()

    # idle memory per server (JupyterLab + extensions, no kernel yet)
    idle = {user: rss_of_tree(server_pid(hub, user)) for user in users}
    print("idle RSS MiB per server:", {user: round(rss / 2**20) for user, rss in idle.items()})

    # the instructor builds and releases an assignment; a student fetches it through the student extension
    course = Path(hub.env["ATTN_CLASS_COURSE"])
    subprocess.run([sys.executable, str(CLASSROOM / "build_course.py"), str(course), "--lang", "en"], check=True)
    nbgrader_env = {**hub.env, "JUPYTER_CONFIG_PATH": str(CLASSROOM / "hub" / "instructor")}
    assignment = "01_scaled_dot_product_attention"
    for step in (["generate_assignment", assignment], ["release_assignment", assignment]):
        done = subprocess.run(
            [sys.executable, "-m", "nbgrader", *step], cwd=course, env=nbgrader_env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
    student = STUDENTS[0]
    _, listed, _ = hub.api("GET", f"/user/{student}/assignments?course_id=attn-notebooks", prefix="")
    assert any(item["assignment_id"] == assignment for item in listed["value"]), listed
    form = urllib.parse.urlencode({"course_id": "attn-notebooks", "assignment_id": assignment}).encode()
    request = urllib.request.Request(hub.url + f"/user/{student}/assignments/fetch", data=form, method="POST")
    request.add_header("Authorization", f"token {hub.token}")
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200
    fetched = hub.root / "homes" / student / assignment / f"{assignment}.ipynb"
    assert fetched.is_file()
    cells = json.loads(fetched.read_text())["cells"]
    answer = next(cell for cell in cells if cell["metadata"].get("nbgrader", {}).get("grade_id") == "ex1_answer")
    assert "".join(answer["source"]).endswith("raise NotImplementedError  # your code here")  # the stub, no answer
    assert not any("BEGIN SOLUTION" in "".join(cell["source"]) for cell in cells)

    # the formgrader: served to the instructor with frames allowed from the same origin, not served to students
    _, page_text, response = hub.api("GET", f"/user/{INSTRUCTOR}/formgrader", prefix="")
    assert "frame-ancestors 'self'" in response.headers.get("Content-Security-Policy", "")
    with pytest.raises(urllib.error.HTTPError):
        hub.api("GET", f"/user/{student}/formgrader", prefix="")

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        login(page, hub, INSTRUCTOR)
        # the way JupyterLab's formgrader tab shows it: an iframe inside the instructor's JupyterLab (blank without
        # the frame-ancestors setting: Chromium shows "This content is blocked")
        page.goto(f"{hub.url}/user/{INSTRUCTOR}/lab", timeout=120_000)
        page.evaluate(IFRAME_JS, f"{hub.url}/user/{INSTRUCTOR}/formgrader")
        frame = page.frame_locator("#formgrader")
        frame.get_by_text("Manage Assignments").first.wait_for(timeout=60_000)
        frame.get_by_text(assignment).first.wait_for(timeout=60_000)
        assert "encountered an error" not in frame.locator("body").inner_text()
        context.clear_cookies()

        login(page, hub, student)
        from e2e.test_lab_widgets import poll, run_all, wait_idle

        page.goto(f"{hub.url}/user/{student}/lab/tree/attn-notebooks/notebooks/00_start_here.ipynb", timeout=120_000)
        page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(timeout=120_000)
        # the page reads "idle" before the kernel exists, and a Run All clicked then is dropped (cells left at [ ],
        # seen here under load): wait for the server's kernel, as tests/e2e's open_notebook does
        poll(
            lambda: server_kernel_idle(hub, student, "00_start_here.ipynb"), 120, "no idle kernel for 00 on the server"
        )
        wait_idle(page, 120)
        run_all(page)
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count()
        prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
        assert prompts and all("[ ]" not in prompt for prompt in prompts), prompts
        busy = rss_of_tree(server_pid(hub, student))
        print(f"RSS MiB of {student}'s server with notebook 00's kernel: {busy / 2**20:.0f} (stderr outputs {errors})")
    finally:
        context.close()
    mean_idle = sum(idle.values()) / len(idle)
    print(
        f"100 students, all idle: {100 * mean_idle / 2**30:.1f} GiB; "
        f"all with a kernel like 00's: {100 * busy / 2**30:.1f} GiB"
    )


IFRAME_JS = """url => {
  const frame = document.createElement('iframe');
  frame.id = 'formgrader';
  frame.src = url;
  frame.style = 'position: fixed; top: 0; left: 0; width: 1000px; height: 700px; z-index: 10000; background: white';
  document.body.appendChild(frame);
}"""


def login(page, hub: Hub, user: str) -> None:
    page.goto(f"{hub.url}/hub/login", timeout=60_000)
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", "any")
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(lambda url: "/hub/login" not in url, timeout=60_000)
