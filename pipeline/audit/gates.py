"""The release gates in words, for the dataset card and the report (one wording for both)."""

from __future__ import annotations


def gate_of(name: str, audit: dict) -> dict:
    """One gate's record in the audit stage's details: the artifact probe's, the commitment mix's, or a policy's."""
    if name == "artifact_probe":
        return audit["artifact_probe"]
    if name == "commitment_mix":
        return audit["commitment_mix_gate"]
    if name == "answer_balance":
        return audit["answer_balance_gate"]
    return audit["policies"][name]["gate"]


def figures(gate: dict) -> str:
    """What a gate was decided on: accuracy against the majority share, a share against its bound, or rows won."""
    if gate.get("status") in ("insufficient_rows", "unproven"):
        return f"not gated: {gate.get('note', 'too few rows')}"
    if "unbalanced" in gate:
        said = f"no value over {gate['max_share']} of a verdict in any split with {gate['min_rows']} or more rows of it"
        return f"{gate['why']}: refused" if gate.get("why") else said
    if "mix" in gate:
        shares = ", ".join(f"{outcome} {share}" for outcome, share in gate["mix"].items())
        declared = "/".join(f"{share:g}" for share in gate["shares"].values())
        said = f"{shares} over {gate['rows']} rows, each within {gate['tolerance']} of {declared} in every split"
        return f"{gate['why']}: refused" if gate.get("why") else said
    if "accuracy" in gate:
        over = [
            f"split {split}: {f['accuracy']} vs {f['majority']} + {f['margin']} over {f['rows']} rows"
            for split, f in gate.get("per_split", {}).items()
            if f["status"] == "fail"
        ]
        return (
            f"accuracy {gate['accuracy']} vs majority share {gate['majority']} + {gate['margin']} over "
            f"{gate['rows']} rows" + "".join(f"; {said}" for said in over)
        )
    if "share" in gate:
        allowed = gate.get("allowed_share", gate["max_share"])
        return (
            f"{gate['won']} of {gate['rows']} rows ({gate['share']}), at most {gate['max_share']} (allowed {allowed})"
        )
    control = gate.get("positive_control") or {}
    check = f"; positive control ({control['rule']}): {'held' if control.get('ok') else 'FAILED'}" if control else ""
    return (
        f"won {gate.get('won', 0)} of the released rows that need it, excluded {gate.get('excluded', 0)} "
        f"candidates{check}"
    )
