"""The Slack tests' fixtures (fake Slack Web API, app factory, warm retriever), reused."""

from tests.slack.conftest import (  # noqa: F401 - fixtures, found by pytest by name
    make_app,
    settings,
    shared_data,
    slack,
    warm_retriever,
)
