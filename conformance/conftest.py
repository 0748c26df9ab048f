"""Turns the conformance plugin on for runs that collect from this folder (`pytest conformance/...`,
`nox -s conformance`). The plugin is not registered as a `pytest11` entry point, so installing the package
changes no other project's pytest runs; elsewhere, `-p conformance.plugin` turns it on."""

import pytest


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    # pytest_addoption is historic: a plugin registered here still gets its own call, options included.
    if not pluginmanager.has_plugin("conformance.plugin"):
        from conformance import plugin

        pluginmanager.register(plugin, "conformance.plugin")


def pytest_configure(config: pytest.Config) -> None:
    from conformance.harness.collector import tune_for_compiling

    tune_for_compiling()


def pytest_runtest_teardown(item: pytest.Item) -> None:
    from conformance.harness.collector import collect_if_grown

    collect_if_grown()  # the tuned collector's full passes are rare; large garbage must not pile up
