"""The Kubernetes and Kueue API as kq sees it: typed objects, quantities, user input, CRDs.

- kq.api.meta / core / kueue (with workload, constants): msgspec Structs for every kind
- kq.api.registry: KindInfo, KINDS, kind_info, kind_for, decode_object, encode_object
- kq.api.load: load_documents / load_object for user input (InputError on anything wrong)
- kq.api.convert: Kueue v1beta1/v1alpha1 -> v1beta2
- kq.api.topology: compact TopologyAssignment <-> (values, count) domains
- kq.api.crd: CustomResourceDefinitions generated from the Kueue Structs
"""

from kq.api.fields import FieldError
from kq.api.load import InputError, LoadedObject, load_documents, load_object
from kq.api.registry import (
    KINDS,
    KindInfo,
    UnknownKindError,
    decode_object,
    decoder_for,
    encode_object,
    kind_for,
    kind_info,
)

__all__ = [
    "FieldError",
    "InputError",
    "LoadedObject",
    "load_documents",
    "load_object",
    "KINDS",
    "KindInfo",
    "UnknownKindError",
    "decode_object",
    "decoder_for",
    "encode_object",
    "kind_for",
    "kind_info",
]
