"""Test-session order: `make test` builds the docs site in the background while pytest runs, so the tests that read
it (tests/test_docs_browser.py) run last, when the build has had the whole session to finish on the spare core."""


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: item.path.name == "test_docs_browser.py")  # stable: every other test keeps its order
