"""The loop IR: expressions (``expr.py``), statements (``stmt.py``), their printer and the
arithmetic simplifier. Frozen nodes with structural equality; every pass is a function
over them."""
