"""Each call's endpoint by botocore's endpoint rules, as its clients apply them.

:class:`Rules` resolves each call with botocore's ``EndpointRulesetResolver`` over the
service's ``endpoint-rule-set-1`` and ``partitions``, with the builtins botocore gives it
(region, ``use_fips_endpoint``, ``use_dualstack_endpoint``, ``account_id_endpoint_mode``,
the credentials' account id) and the operation's context parameters from the service model
(``OperationType``, ``StreamARN``, ...). The signing name and region are the endpoint's
``authSchemes`` where it has them, else the model's signing name and the client's region.

This module, botocore's rules and its models are imported and read only when a client
without an explicit endpoint is made (once per process and service), never at import.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Mapping
from typing import Any

from .._errors import EndpointError
from ._endpoints import Endpoint, EndpointSettings

__all__ = ["Rules", "partition_of"]

_ACCOUNT = "kinesis_trio_account_id"
_PROBE = "kinesis_trio_probe"


def _load_model(loader: Any, service: str, type_name: str) -> Any:
    """``loader.load_service_model(service, type_name)`` without its first step, a listing
    of every service's folder on every search path (botocore 1.43: some 440 folders listed
    and 1,350 ``stat`` calls per model type; the model and the rule set are two) to refuse
    an unknown service: the latest API version of ``service``'s own folder, its file and its
    extras, as botocore/loaders.py's ``load_service_model`` reads them
    (``DataNotFoundError`` for an unknown service)."""
    import botocore.exceptions
    import botocore.loaders

    version = loader.determine_latest_version(service, type_name)
    model = loader.load_data(f"{service}/{version}/{type_name}")
    extras = []
    for kind in loader.extras_types:
        with contextlib.suppress(botocore.exceptions.DataNotFoundError):
            extras.append(loader.load_data(f"{service}/{version}/{type_name}.{kind}-extras"))
    botocore.loaders.ExtrasProcessor().process(model, extras)
    return model


@functools.cache
def _service_data(service: str) -> tuple[Any, Any, Any]:
    """botocore's model, endpoint rule set and partitions for ``service`` (read once)."""
    import botocore.loaders
    import botocore.model

    loader = botocore.loaders.create_loader()
    model = botocore.model.ServiceModel(_load_model(loader, service, "service-2"), service)
    ruleset = _load_model(loader, service, "endpoint-rule-set-1")
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
