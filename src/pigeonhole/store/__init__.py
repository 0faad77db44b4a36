"""Where the state is stored, by backend: sqlite/ (the default) and postgres/.

Beside them, what both share: errors.py (what goes wrong, whichever backend),
bodies.py (how a body is kept), loading.py (stored rows -> the in-memory state) and
group_commit.py (many steps' writes per commit).
"""
