"""The job file: YAML (a Jinja2 template) -> the job spec, validated, frozen dataclasses."""
from .loader import load_job, parse_set_options, render_template
from .model import (
    DockerSpec, EnvironmentSpec, JobSpec, Resources, RestartSpec, RoleSpec, Timeouts,
)
from .validate import spec_from_dict

__all__ = [
    "DockerSpec", "EnvironmentSpec", "JobSpec", "Resources", "RestartSpec", "RoleSpec",
    "Timeouts", "load_job", "parse_set_options", "render_template", "spec_from_dict",
]
