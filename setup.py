"""Packaging beyond pyproject.toml: the repository's top-level `conf/` (ajet's config tree) ships
inside the wheel as `ajet/conf/`, where `ajet.config.groups.packaged_conf_dir` finds it."""

from setuptools import find_namespace_packages, find_packages, setup

conf_packages = ["ajet.conf", *(f"ajet.conf.{name}" for name in find_namespace_packages(where="conf"))]
setup(
    packages=[*find_packages(include=["ajet", "ajet.*"]), *conf_packages],
    package_dir={"ajet.conf": "conf"},
)
