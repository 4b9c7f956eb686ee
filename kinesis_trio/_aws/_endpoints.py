"""Where each AWS call goes: botocore's endpoint rules, as its clients apply them.

An explicit endpoint (``endpoint_url``, else ``AWS_ENDPOINT_URL_<SERVICE>``, else
``AWS_ENDPOINT_URL``, unless ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS``) is used as is, as
botocore does (its ``FIPS``/``DualStack`` builtins are False with one: botocore/args.py
``compute_endpoint_resolver_builtin_defaults``). Otherwise :class:`Rules` resolves each call
with botocore's ``EndpointRulesetResolver`` over the service's ``endpoint-rule-set-1`` and
``partitions``, with the builtins botocore gives it (region, ``use_fips_endpoint``,
``use_dualstack_endpoint``, ``account_id_endpoint_mode``, the credentials' account id) and
the operation's context parameters from the service model (``OperationType``,
``StreamARN``, ...). The signing name and region are the endpoint's ``authSchemes`` where it
has them, else the model's signing name and the client's region.

botocore's rules and models are imported and read only here, when a client without an
explicit endpoint is made (once per process and service), never at import.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import EndpointError
from ._credentials import Chain

__all__ = [
    "Endpoint",
    "EndpointSettings",
    "Rules",
    "configured_endpoint",
    "endpoint_settings",
]

_MODES = ("preferred", "required", "disabled")
_ACCOUNT = "kinesis_trio_account_id"
_PROBE = "kinesis_trio_probe"


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


@functools.cache
def _service_data(service: str) -> tuple[Any, Any, Any]:
    """botocore's model, endpoint rule set and partitions for ``service`` (read once)."""
    import botocore.loaders
    import botocore.model

    loader = botocore.loaders.create_loader()
    model = botocore.model.ServiceModel(loader.load_service_model(service, "service-2"), service)
    ruleset = loader.load_service_model(service, "endpoint-rule-set-1")
    return model, ruleset, loader.load_data("partitions")


@functools.cache
def _endpoints_data() -> Any:
    """botocore's ``endpoints.json`` (1.2 MB: read only when FIPS or dual-stack is asked)."""
    import botocore.loaders

    return botocore.loaders.create_loader().load_data("endpoints")


def partition_of(region: str, partitions: Mapping[str, Any]) -> str | None:
    """The partition whose region list or ``regionRegex`` holds ``region``; None when none
    does (botocore's rules would fall back to ``aws`` for it: a typo, most likely)."""
    for partition in partitions["partitions"]:
        if region in partition["regions"]:
            return str(partition["id"])
    for partition in partitions["partitions"]:
        if re.match(partition["regionRegex"], region):
            return str(partition["id"])
    return None


def _hint(reason: str, settings: EndpointSettings, arn: str | None) -> str:
    """The setting to change for botocore's ``reason``."""
    text = reason.lower()
    hints = []
    if "fips" in text and settings.use_fips:
        hints.append(
            "FIPS endpoints are asked by AWS_USE_FIPS_ENDPOINT or the profile's "
            "use_fips_endpoint: unset it, or use a region whose partition has them"
        )
    if "dualstack" in text and settings.use_dualstack:
        hints.append(
            "dual-stack endpoints are asked by AWS_USE_DUALSTACK_ENDPOINT or the profile's "
            "use_dualstack_endpoint: unset it, or use a region whose partition has them"
        )
    if "accountid" in text.replace(" ", ""):
        hints.append(
            "account_id_endpoint_mode is 'required' (AWS_ACCOUNT_ID_ENDPOINT_MODE or the "
            "profile's): give credentials an account id (AWS_ACCOUNT_ID, the profile's "
            "aws_account_id) or set it to 'preferred'"
        )
    if arn is not None and ("arn" in text or "partition" in text):
        hints.append(
            f"{arn!r} is not a resource of the client's partition: pass region_name=... "
            "of the ARN's partition, or the ARN of a stream in the client's"
        )
    return "; ".join(hints) or "pass endpoint_url=... or change region_name"


class Rules:
    """One service's endpoint rules for one client (its region and settings): the
    :class:`Endpoint` of each call, from botocore's resolver, the way a botocore client
    of that region and config would resolve it."""

    def __init__(self, service: str, region: str, settings: EndpointSettings) -> None:
        import botocore.hooks
        from botocore.regions import EndpointResolverBuiltins as Builtins
        from botocore.regions import EndpointRulesetResolver

        self.service = service
        self.region = region
        self.settings = settings
        model, ruleset, partitions = _service_data(service)
        if partition_of(region, partitions) is None:
            known = ", ".join(
                f"{p['id']}: {' '.join(r for r in p['regions'] if not r.endswith('-global'))}"
                for p in partitions["partitions"]
            )
            raise EndpointError(
                f"region {region!r} is in none of the AWS partitions botocore knows ({known}): "
                "set region_name=... (or AWS_REGION, AWS_DEFAULT_REGION, the profile's "
                "region) to a region of your partition, or pass endpoint_url=..."
            )
        self._model = model
        if settings.use_fips or settings.use_dualstack:
            self._check_variants()
        emitter = botocore.hooks.HierarchicalEmitter()
        # the credentials' account id of each resolution, as botocore's deferred builtin
        emitter.register(f"before-endpoint-resolution.{model.service_id.hyphenize()}", _set_account)
        self._resolver = EndpointRulesetResolver(
            endpoint_ruleset_data=ruleset,
            partition_data=partitions,
            service_model=model,
            builtins={
                Builtins.AWS_REGION: region,
                Builtins.AWS_USE_FIPS: settings.use_fips,
                Builtins.AWS_USE_DUALSTACK: settings.use_dualstack,
                Builtins.SDK_ENDPOINT: None,
                Builtins.ACCOUNT_ID: None,
                Builtins.ACCOUNT_ID_ENDPOINT_MODE: settings.account_id_endpoint_mode,
            },
            client_context={},
            event_emitter=emitter,
            use_ssl=True,
        )

    def resolve(
        self,
        operation: str,
        context: Mapping[str, str],
        account_id: str | None = None,
        *,
        probe: bool = False,
    ) -> Endpoint:
        """The endpoint of ``operation`` called with ``context`` (its members that are
        endpoint context parameters: ``StreamARN``, ...) by credentials of ``account_id``
        (``probe``: as if the account id endpoint mode were ``disabled``, for a client's
        ``endpoint_url`` before its credentials are known). Raises :class:`EndpointError`
        with botocore's reason and the setting to change."""
        import botocore.exceptions

        arn = next((value for key, value in context.items() if key.endswith("ARN")), None)
        if arn is not None:
            self._check_region(arn)
        try:
            found = self._resolver.construct_endpoint(
                self._model.operation_model(operation),
                dict(context),
                {_ACCOUNT: account_id, _PROBE: probe},
            )
        except botocore.exceptions.BotoCoreError as exc:
            reason = str(exc)
            raise EndpointError(
                f"no {self.service} endpoint for {operation} in {self.region}"
                f"{f' with {arn!r}' if arn else ''}: {reason} ({_hint(reason, self.settings, arn)})"
            ) from None
        name, region = self._model.signing_name, self.region
        schemes = found.properties.get("authSchemes")
        if schemes:
            _, signing = self._resolver.auth_schemes_to_signing_ctx(schemes)
            name = signing.get("signing_name", name)
            region = signing.get("region", region)
        return Endpoint(found.url.rstrip("/"), str(name), str(region))

    def _check_variants(self) -> None:
        """A botocore client is refused FIPS or dual-stack where its ``endpoints.json``
        models no such endpoint for the service and region (``ClientEndpointBridge.resolve``,
        botocore/client.py, at client creation, before the rules): so is ours."""
        import botocore.exceptions
        from botocore.regions import EndpointResolver

        prefix = self._model.endpoint_prefix
        resolver = EndpointResolver(_endpoints_data(), uses_builtin_data=True)
        variants = {
            "use_dualstack_endpoint": self.settings.use_dualstack,
            "use_fips_endpoint": self.settings.use_fips,
        }
        try:
            if not resolver.construct_endpoint(prefix, self.region, **variants):
                resolver.construct_endpoint(prefix, self.region, partition_name="aws", **variants)
        except botocore.exceptions.EndpointVariantError as exc:
            reason = f"{str(exc).rstrip(': ')}: {exc.kwargs.get('error_msg')}"
            raise EndpointError(
                f"no {self.service} endpoint in {self.region}: {reason} "
                f"({_hint(reason + ' fips dualstack', self.settings, None)})"
            ) from None

    def _check_region(self, arn: str) -> None:
        parts = arn.split(":", 5)
        if len(parts) == 6 and parts[3] and parts[3] != self.region:
            raise EndpointError(
                f"{arn!r} is in region {parts[3]}, but the {self.service} client is for "
                f"{self.region} (requests are signed for one region and sent to its "
                f"endpoint): pass region_name={parts[3]!r}"
            )


def _set_account(builtins: dict[str, Any], context: Mapping[str, Any], **kwargs: Any) -> None:
    from botocore.regions import EndpointResolverBuiltins as Builtins

    builtins[Builtins.ACCOUNT_ID] = context.get(_ACCOUNT)
    if context.get(_PROBE):
        builtins[Builtins.ACCOUNT_ID_ENDPOINT_MODE] = "disabled"
