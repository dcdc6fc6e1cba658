"""The tables of the BeamRaster capacity study (``hwcosim beamraster study``)."""

from __future__ import annotations

from hwcosim.models.tables import show

__all__ = ["print_study"]


def print_study(res: dict, con=None) -> None:
    """Sum rate vs SNR per channel kind, the update cost, and ZF vs its closed form."""
    from hwcosim.models.beamraster.study import METHODS
    from rich.console import Console
    from rich.table import Table

    con = con or Console()
    for kind in res["config"]["kinds"]:
        t = Table(title=f"Sum rate (bit/s/Hz), {kind}, M={res['config']['base']['M']}, K={res['config']['base']['K']}")
        t.add_column("SNR dB", justify="right")
        for m in METHODS:
            t.add_column(f"{m} bit/s/Hz", justify="right")
        t.add_column("BR / ZF", justify="right")
        for r in res["vs_snr"][kind]:
            t.add_row(str(r["snr_db"]), *(f"{r[m]:.1f}" for m in METHODS), f"{r['beamraster'] / r['zf']:.1%}")
        show(t, con)
    t = Table(title="Precoder update cost per subcarrier: complex multiplies, numpy time / ZF's "
                                          "(median [IQR])")
    t.add_column("M x K")
    for m in METHODS:
        t.add_column(m, justify="right")
    for c in res["cost"]:
        t.add_row(f"{c['M']} x {c['K']}", *(f"{c['cmul_per_update'][m]} {c['time_ratio_to_zf'][m]:.2f}x "
                                            f"[{c['time_ratio_iqr'][m][0]:.2f},{c['time_ratio_iqr'][m][1]:.2f}]"
                                            for m in METHODS))
    show(t, con)
    con.print(f"ZF vs closed form (Rayleigh): max relative error {res['headline']['zf_closed_form_max_rel_err']:.2%}")
