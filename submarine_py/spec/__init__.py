"""The job spec: YAML (a Jinja2 template) -> validated, frozen dataclasses."""
from .loader import load_job, parse_set_options, render_template
from .model import (
    DockerSpec, EnvironmentSpec, JobSpec, Resources, RestartPolicy, RoleSpec, Timeouts,
)

__all__ = [
    "DockerSpec", "EnvironmentSpec", "JobSpec", "Resources", "RestartPolicy", "RoleSpec",
    "Timeouts", "load_job", "parse_set_options", "render_template",
]
