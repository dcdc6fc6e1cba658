"""KV-Direct key-value processing pipeline in RTL (Li et al., SOSP 2017).

``hash``      :class:`KeyHash`, the bit-exact ``fmix32(CRC-32(key || len))`` of 8 B keys.
``pipeline``  :class:`Pipeline`: decode, hash, reservation station with same-bucket chains and
              forwarding, memory engine with many reads in flight, response path. Golden model:
              :mod:`hwcosim.models.kvdirect.rtl_model`.
"""

from .hash import KeyHash
from .pipeline import Pipeline

__all__ = ["KeyHash", "Pipeline"]
