"""Where each AWS call goes: an explicit endpoint, or the settings botocore's endpoint rules
take (``_rules`` applies them).

An explicit endpoint (``endpoint_url``, else ``AWS_ENDPOINT_URL_<SERVICE>``, else
``AWS_ENDPOINT_URL``, unless ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS``) is used as is, as
botocore does (its ``FIPS``/``DualStack`` builtins are False with one: botocore/args.py
``compute_endpoint_resolver_builtin_defaults``). Otherwise :class:`._rules.Rules` resolves
each call with botocore's ``EndpointRulesetResolver``, with the settings
:func:`endpoint_settings` reads. A client of an explicit endpoint imports neither
``_rules`` nor botocore's rules, models and loader.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .._errors import EndpointError
from ._credentials import Chain

__all__ = [
    "Endpoint",
    "EndpointSettings",
    "configured_endpoint",
    "endpoint_settings",
]

_MODES = ("preferred", "required", "disabled")


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def configured_endpoint(endpoint_url: str | None, env_suffix: str) -> str | None:
    """The explicit endpoint: ``endpoint_url``, ``AWS_ENDPOINT_URL_<SERVICE>``,
    ``AWS_ENDPOINT_URL`` (the variables skipped when ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS``
    is true, as in botocore), without a trailing slash; None for the rules' endpoint."""
    url = endpoint_url
    if not url and not _env_flag("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        url = os.environ.get(f"AWS_ENDPOINT_URL_{env_suffix}") or os.environ.get("AWS_ENDPOINT_URL")
    if not url:
        return None
    url = url.strip().rstrip("/")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest:
        raise ValueError(f"invalid endpoint URL {url!r}: expected http(s)://host[:port]")
    return url


@dataclass(frozen=True, slots=True)
class EndpointSettings:
    """The settings botocore's rules take beside the region (botocore's defaults)."""

    use_fips: bool = False
    use_dualstack: bool = False
    account_id_endpoint_mode: str = "preferred"


def _config_file() -> str:
    # botocore/configprovider.py: 'config_file': (None, 'AWS_CONFIG_FILE', '~/.aws/config')
    return os.path.expanduser(os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config")


def endpoint_settings(session: Any = None) -> EndpointSettings:
    """``use_fips_endpoint``, ``use_dualstack_endpoint`` and ``account_id_endpoint_mode``
    as botocore's session reads them: the environment (``AWS_USE_FIPS_ENDPOINT``,
    ``AWS_USE_DUALSTACK_ENDPOINT``, ``AWS_ACCOUNT_ID_ENDPOINT_MODE``), else the profile in the
    config file, else the default (botocore/configprovider.py's session variables).

    ``session``: a ``Chain`` (made a botocore Session only if a config file exists: without
    one the environment decides, and a Lambda function imports no ``botocore.session``), a
    botocore Session, or None (the default profile's)."""
    from botocore.utils import ensure_boolean

    names = {
        "use_fips_endpoint": "AWS_USE_FIPS_ENDPOINT",
        "use_dualstack_endpoint": "AWS_USE_DUALSTACK_ENDPOINT",
        "account_id_endpoint_mode": "AWS_ACCOUNT_ID_ENDPOINT_MODE",
    }
    values: dict[str, Any] = {name: os.environ.get(env) for name, env in names.items()}
    unset = [name for name, value in values.items() if value is None]
    if unset and (session is None or isinstance(session, Chain)):
        session = (session or Chain()).session() if _is_file() else None
    if unset and session is not None:
        for name in unset:
            values[name] = session.get_config_variable(name)
    mode = str(values["account_id_endpoint_mode"] or "preferred").strip().lower()
    if mode not in _MODES:
        raise EndpointError(
            f"account_id_endpoint_mode {mode!r} (AWS_ACCOUNT_ID_ENDPOINT_MODE or the "
            f"profile's account_id_endpoint_mode) is not one of {', '.join(_MODES)}"
        )
    return EndpointSettings(
        use_fips=bool(ensure_boolean(values["use_fips_endpoint"] or False)),
        use_dualstack=bool(ensure_boolean(values["use_dualstack_endpoint"] or False)),
        account_id_endpoint_mode=mode,
    )


def _is_file() -> bool:
    return os.path.isfile(_config_file())


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where one call goes and how it is signed."""

    url: str  #: without a trailing slash
    signing_name: str
    signing_region: str
