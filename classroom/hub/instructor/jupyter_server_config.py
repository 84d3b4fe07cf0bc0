"""The instructor's JupyterLab under the class hub (classroom/jupyterhub_config.py sets JUPYTER_CONFIG_PATH here)."""

c = get_config()  # noqa: F821
c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.formgrader": True,
    "nbgrader.server_extensions.course_list": True,
    "nbgrader.server_extensions.assignment_list": True,
    "nbgrader.server_extensions.validate_assignment": True,
    "nbgitpuller": True,
}
# The formgrader opens inside JupyterLab in an iframe. JupyterHub >= 4.1 sends `frame-ancestors 'none'` from every
# single-user server (it only setdefault()s the header), so the formgrader tab stays blank (nbgrader #1870, documented
# by nbgrader #1947). Allowing frames from the same origin on the instructor's server only brings it back; students
# keep JupyterHub's default. Where the hub can use per-user subdomains (JupyterHub.enable_subdomains) that is safer.
c.ServerApp.tornado_settings = {"headers": {"Content-Security-Policy": "frame-ancestors 'self'"}}
c.MappingKernelManager.cull_idle_timeout = 3600
c.MappingKernelManager.cull_interval = 300
