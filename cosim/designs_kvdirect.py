"""KV-Direct designs for ``hwcosim verilog``."""

from models.kvdirect.rtl_model import PipelineParams


def _pipeline(p: PipelineParams):
    from hdl.kvdirect import Pipeline

    return Pipeline(p)


DESIGNS = []


def _add():
    from cosim.designs import Design

    DESIGNS.append(Design(
        name="kvdirect-pipeline", top="kvdirect_pipeline", build=_pipeline,
        default_params=lambda: PipelineParams(memory_bytes=1 << 20, entries=64, rs_slots=1024),
        description="KV-Direct KV processing pipeline: hash, reservation station with forwarding, "
                    "memory engine (Li et al., SOSP 2017)"))


_add()
