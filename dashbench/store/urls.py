"""A database URL's text: its scheme, and its password never shown (`masked` is the only way a URL is
written anywhere; `without_password` what may travel to another host). Which database a scheme names is
registry.py's."""

from __future__ import annotations

import re

# A scheme and "//": a server's address, not a file. Taken as a path it made folders named like the URL.
_URL = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.-]*)://")


def url_scheme(text) -> str | None:
    """ "postgresql+psycopg://" for a database URL, None for a path."""
    match = _URL.match(text) if isinstance(text, str) else None
    return match.group(1) + "://" if match else None


def masked(text) -> str:
    """A database URL with its password as ***: the only form a URL is shown, logged or stored in."""
    return _password_as(str(text), "***")


def without_password(text) -> str:
    """A database URL with no password in it (neither `user:password@` nor a `password=` parameter):
    what may travel to another host, whose libpq then reads the password from PGPASSWORD or ~/.pgpass
    (PGPASSFILE). A path, or a URL without one, is returned as it is."""
    return _password_as(str(text), None)


def _password_as(text: str, shown: str | None) -> str:
    """`text` with its password, in either place libpq takes one (`user:password@`, a `?password=`
    parameter), shown as `shown`, or dropped when None."""
    parts = _userinfo(text)
    if parts is not None and parts[2] is not None:
        head, user, _password_, host = parts
        text = f"{head}{user}{'' if shown is None else ':' + shown}@{host}"
    base, question, query = text.partition("?")
    if not question or url_scheme(text) is None:
        return text
    kept = [
        p if not _is_password_param(p) else None if shown is None else f"{p.split('=', 1)[0]}={shown}"
        for p in query.split("&")
    ]
    kept = [p for p in kept if p is not None]
    return base + ("?" + "&".join(kept) if kept else "")


def _is_password_param(part: str) -> bool:
    return part.split("=", 1)[0].lower() == "password"


def _userinfo(text: str):
    """(scheme://, user, password or None, what follows the last @) of a URL with a user, else None. The
    LAST @: a password with an unescaped @ or / in it is still all password, never shown in part."""
    scheme = url_scheme(text)
    if scheme is None:
        return None
    start = text.index("://") + 3
    rest = text[start:]
    if "@" not in rest:
        return None
    userinfo, host = rest.rsplit("@", 1)
    user, colon, password = userinfo.partition(":")
    return text[:start], user, password if colon else None, host


class ServerURL(str):
    """A PostgreSQL URL whose text is the masked form (what any message, log or page shows of it) and
    whose `url` opens the database: --db, DASHBENCH_DB and the dashboard's settings hold one, so no
    f-string anywhere can print the password. str() of it is the masked text only."""

    def __new__(cls, url):
        full = str(getattr(url, "url", url)).strip()
        self = super().__new__(cls, masked(full))
        self.url = full
        return self


def scrub(message: str, url: str | None) -> str:
    """`message` with the URL's password (if any) replaced: a driver's error may quote what it was given."""
    if not url:
        return message
    password = _password(url)
    text = message.replace(url, masked(url))
    return text.replace(password, "***") if password else text


def _password(url: str) -> str | None:
    parts = _userinfo(url)
    if parts is not None and parts[2]:
        return parts[2]
    _base, question, query = url.partition("?")
    given = [p.split("=", 1)[1] for p in query.split("&") if question and "=" in p and _is_password_param(p)]
    return given[0] if given and given[0] else None
