"""The fourth hostile round (issue 67): each defect found, under its own name, as a user or
an attacker met it. Nothing a person wrote is lost, no file leads cpg outside its folder,
odd input never ends in a traceback or a wrong verdict."""

from __future__ import annotations

from pathlib import Path

from conftest import EXAMPLE, cpg

PERSONS_CART = """\
# copied from cpg's output once; app.kubernetes.io/managed-by: cpg no more
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: cart-by-hand
  namespace: shop
  annotations:
    note: "was app.kubernetes.io/managed-by: cpg"
spec:
  endpointSelector:
    matchLabels:
      app: cart
  ingress:
  - fromEndpoints:
    - matchLabels:
        app: frontend
"""


def test_a_persons_file_that_quotes_cpgs_mark_is_never_merged_into(tmp_path: Path) -> None:
    """A comment or an annotation value mentioning ``app.kubernetes.io/managed-by: cpg`` made
    cpg take a person's file as its own and merge into it (14 → 45 lines, nothing said). The
    parsed label decides: cpg writes its own file beside it and names the person's."""
    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    cart = out / "shop" / "cart.yaml"
    cart.write_text(PERSONS_CART)
    ran = cpg("replay", str(EXAMPLE), "-d", str(out))
    assert ran.returncode == 0, ran.stderr
    assert cart.read_text() == PERSONS_CART
    assert (out / "shop" / "cart-cpg.yaml").is_file()
    assert "CiliumNetworkPolicy cart-by-hand in shop/cart.yaml (left as it is" in ran.stdout
