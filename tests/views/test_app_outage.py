"""The dashboard open while its team store's server crashes (`pg_ctl -m immediate stop`) and starts again:
every page says the store is unreachable and that it retries, with no traceback, and shows its runs again
once the server answers, with no restart of the dashboard."""

from fixtures.app_outage import team  # noqa: F401 (fixtures)
from fixtures.app_test import APP, TIMEOUT_S, assert_clean, texts
from fixtures.pg_restart import crash, pg_own, start_again  # noqa: F401 (pg_own: a fixture)
from streamlit.testing.v1 import AppTest

from dashbench.views.common import context
from dashbench.views.streamlit import ui

PAGES = ["pages/compare.py", "pages/results.py", "pages/prices.py", "pages/run.py"]


def outage_shown(at: AppTest) -> bool:
    return any(w.value.startswith(context.OUTAGE_TEXT) for w in at.warning)


def test_a_page_open_through_a_server_crash_says_it_retries_and_recovers_without_a_restart(team):
    server, stored = team
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.switch_page("pages/results.py").run()
    assert_clean(at)
    assert len(at.dataframe[0].value) == stored and not outage_shown(at)
    crash(server)
    for page in PAGES:  # the page open when it went, and every other one asked for meanwhile
        at.switch_page(page).run()
        assert_clean(at)
        assert outage_shown(at), (page, texts(at))
        assert "unreachable, retrying" in texts(at) and "Connection refused" in texts(at)
    start_again(server)
    at.switch_page("pages/results.py").run()  # what the page's own retry reruns
    assert_clean(at)
    assert not outage_shown(at) and len(at.dataframe[0].value) == stored


def test_how_often_a_page_asks_again_is_its_variable_and_a_bad_one_keeps_the_default(monkeypatch):
    for text, seconds in (("1", 1.0), ("0.5", 0.5), ("", 3.0), ("0", 3.0), ("-2", 3.0), ("soon", 3.0), ("inf", 3.0)):
        monkeypatch.setenv(ui.OUTAGE_RETRY_ENV, text)
        assert ui.outage_retry_s() == seconds, text
