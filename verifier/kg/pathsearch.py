"""Paths of one to three edges between two entities of the local store, found inside Postgres.

A bidirectional search: the neighbourhoods of both ends are joined on their common nodes (2 hops), and
the edges between the two neighbourhoods give 3-hop paths. Only the matches leave the database, so a
hub end with tens of thousands of edges costs an index scan, not a transfer. Degree pruning: the middle
nodes of 3-hop paths are the most specific (lowest-degree) non-hub neighbours of each end.

Results are rows of (head, relation, tail, forward) per hop, ``forward`` meaning the edge points the
way the path is walked from the source.
"""

from __future__ import annotations

TRIPLE = "verifier_triple"
ENTITY = "verifier_entity"

# Middle nodes of 3-hop paths with more edges than this are not expanded (they may still be the
# middle of a 2-hop path, found from both sides).
HUB_DEGREE = 2000
# At most this many neighbours of each end are tried as middles of 3-hop paths.
MAX_MIDDLES = 200

_NEAR = f"""
  {{name}} AS (
    SELECT head_id AS h, relation_id AS r, tail_id AS t, tail_id AS x, true AS fwd
      FROM {TRIPLE} WHERE head_id = %({{end}})s AND tail_id <> %({{end}})s
    UNION ALL
    SELECT head_id, relation_id, tail_id, head_id, false
      FROM {TRIPLE} WHERE tail_id = %({{end}})s AND head_id <> %({{end}})s)"""

NEAR_SOURCE = _NEAR.format(name="near_a", end="a")
NEAR_TARGET = _NEAR.format(name="near_b", end="b")

# 1- and 2-hop paths in one statement (the neighbourhoods are read once). Walking a → x → b, the second
# edge is forward when it points x → b, i.e. when seen from b it points towards b (fwd false in near_b).
SHORT = f"""WITH {NEAR_SOURCE}, {NEAR_TARGET}
(SELECT h, r, t, fwd, NULL::bigint, NULL::bigint, NULL::bigint, NULL::boolean FROM near_a WHERE x = %(b)s)
UNION ALL
(SELECT na.h, na.r, na.t, na.fwd, nb.h, nb.r, nb.t, NOT nb.fwd
 FROM near_a na JOIN near_b nb ON na.x = nb.x
 WHERE na.x <> %(b)s AND nb.x <> %(a)s
 LIMIT %(cap)s)"""

THREE_HOPS = f"""WITH {NEAR_SOURCE}, {NEAR_TARGET},
  mid_a AS (SELECT id FROM {ENTITY} WHERE id IN (SELECT x FROM near_a WHERE x <> %(b)s) AND degree <= %(hub)s
            ORDER BY degree, id LIMIT %(middles)s),
  mid_b AS (SELECT id FROM {ENTITY} WHERE id IN (SELECT x FROM near_b WHERE x <> %(a)s) AND degree <= %(hub)s
            ORDER BY degree, id LIMIT %(middles)s),
  bridge AS (
    SELECT head_id AS h, relation_id AS r, tail_id AS t, head_id AS xa, tail_id AS xb, true AS fwd FROM {TRIPLE}
      WHERE head_id IN (SELECT id FROM mid_a) AND tail_id IN (SELECT id FROM mid_b)
    UNION ALL
    SELECT head_id, relation_id, tail_id, tail_id, head_id, false FROM {TRIPLE}
      WHERE head_id IN (SELECT id FROM mid_b) AND tail_id IN (SELECT id FROM mid_a)),
  bridges AS (SELECT * FROM bridge WHERE xa <> xb LIMIT %(cap)s)
SELECT na.h, na.r, na.t, na.fwd, m.h, m.r, m.t, m.fwd, nb.h, nb.r, nb.t, NOT nb.fwd
FROM bridges m JOIN near_a na ON na.x = m.xa JOIN near_b nb ON nb.x = m.xb
WHERE na.x <> %(b)s AND nb.x <> %(a)s
LIMIT %(cap)s"""

RawStep = tuple[tuple[int, int, int], bool]


def _steps(row: tuple) -> list[RawStep]:
    return [((row[i], row[i + 1], row[i + 2]), row[i + 3]) for i in range(0, len(row), 4) if row[i] is not None]


def find_paths(cursor, source: int, target: int, *, max_hops: int, limit: int,
               excluded: set[tuple[int, int, int]]) -> list[list[RawStep]]:
    """Shortest first: every 1-hop path, then 2-hop paths, then 3-hop paths while fewer than ``limit``."""
    params = {"a": source, "b": target, "hub": HUB_DEGREE, "middles": MAX_MIDDLES, "cap": limit * 5}
    found: list[list[RawStep]] = []
    for query in (SHORT, THREE_HOPS) if max_hops >= 3 else (SHORT,):
        if query is THREE_HOPS and len(found) >= limit:
            break
        cursor.execute(query, params)
        for row in cursor.fetchall():
            steps = _steps(row)
            if len(steps) <= max_hops and not any(edge in excluded for edge, _ in steps):
                found.append(steps)
    found.sort(key=len)  # 1-hop paths before 2-hop ones, whatever order the union returned
    return found[:limit]
