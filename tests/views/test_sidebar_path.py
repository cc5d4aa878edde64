"""The sidebar's database line: the path as a shell would take it, shortened from the left so that no
name is broken across lines ("sqlit" / "e"), the full path in its tooltip."""

from fixtures.app_test import start

from dashbench.views.common.format import SIDEBAR_PATH_CHARS, path_text, short_path_text

LONG_FOLDER = "a_team_store_kept_under_a_long_folder_name_for_the_benchmarks"


def test_the_sidebar_names_a_database_under_home_as_a_shell_would(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    db = tmp_path / ".dashbench" / "runs.sqlite"
    assert path_text(db) == "~/.dashbench/runs.sqlite" == short_path_text(db)
    assert path_text("/srv/results/runs.sqlite") == "/srv/results/runs.sqlite"
    at = start(monkeypatch, db)
    (caption,) = [c for c in at.sidebar.caption if "database:" in c.value]
    assert "`~/.dashbench/runs.sqlite`" in caption.value
    assert not caption.proto.help  # nothing hidden, nothing to hover for


def test_a_long_path_is_shortened_from_the_left_with_whole_names():
    deep = "/tmp/pytest-of-someone/pytest-12/test_a_long_path0/work/projects/dashbench/runs.sqlite"
    assert short_path_text(deep) == "…/projects/dashbench/runs.sqlite"
    assert len(short_path_text(deep)) <= SIDEBAR_PATH_CHARS
    assert short_path_text(deep, room=24) == "…/dashbench/runs.sqlite"
    # A folder too long for the room is left out whole, never cut; the file's name is always whole.
    assert short_path_text(f"/srv/{LONG_FOLDER}/runs.sqlite") == "…/runs.sqlite"
    name = "a_file_name_longer_than_the_sidebar_has_room_for.sqlite"
    assert short_path_text(f"/srv/x/{name}") == f"…/{name}"
    # Short enough already, or a server's URL (its own parts are not folders): as path_text gives it.
    assert short_path_text("/srv/results/runs.sqlite") == "/srv/results/runs.sqlite"
    url = "postgresql://bench:***@db.team.example.com:5432/dashbench"
    assert short_path_text(url) == url
    # No invisible break characters: what is copied from the line is what was shown.
    assert all(c.isprintable() for c in short_path_text(deep))


def test_the_sidebar_shows_a_long_path_shortened_and_the_full_one_in_its_tooltip(tmp_path, monkeypatch):
    db = tmp_path / LONG_FOLDER / "runs.sqlite"
    db.parent.mkdir()
    at = start(monkeypatch, db)
    (caption,) = [c for c in at.sidebar.caption if "database:" in c.value]
    assert "database: `…/runs.sqlite`" in caption.value
    assert caption.proto.help == f"`{path_text(db)}`"
