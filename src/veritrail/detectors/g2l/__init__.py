"""G2LDetect, the global-to-local detector (docs/detectors.md; Cheng et al., AAAI 2025).

1. **Tree** (`g2l_tree` prompt, strict JSON schema): the model turns the text to check into a
   hierarchy — the central subject at the root, main topics as branches, specific facts as
   leaves. The reply is parsed leniently (`parse_tree` also reads nested-object and list shapes);
   an unreadable or out-of-bounds tree is re-asked by `Model.generate_json` within the model's
   re-ask bound and then recorded as `G2LStatus.TREE_FAILED`, never raised.
2. **Paths** (`tree_paths`): every root-to-leaf path is one local detail carrying its own
   context; there is exactly one path per leaf, so every leaf is covered.
3. **Check** (`g2l_check` prompt): each path is checked against the reference documents
   (`supported` true/false with a reason). References larger than `G2LConfig.reference_tokens`
   are split into chunks that fit (by sentence, as the verification loop batches nodes); a path
   is supported when **any** chunk supports it. Chunks are tried in order and the first support
   ends the path's checks. This errs toward "supported" only if one chunk alone backs the path;
   a path whose support is spread over two chunks can be missed (a false alarm), which is the
   price of fitting long references into a small context. When everything fits (the default for
   short references) the path is checked against all documents at once.
4. **AND aggregation** (`aggregate`): the text passes only if every path is supported. A path
   whose replies could not be read counts as unknown: any unsupported path makes the text fail;
   otherwise an unknown path makes it `UNDETERMINED`.

`g2l_detect` checks a text against documents; `g2l_claim` checks one claim against documents or a
DAG's roots; `G2LDetector` runs it behind the package's `Detector` protocol (`detectors.base`),
which `veritrail eval --method g2l` and `veritrail detect` use.

One module per part, every public name importable from here (``from veritrail.detectors.g2l
import g2l_detect``):

* `records` — `G2LConfig`, `G2LStatus`, `PathCheck`, `G2LResult`, `TreeOutcome`,
  `G2LClaimOutcome`;
* `tree` — `TREE_SCHEMA`, `TreeNode`, `parse_tree`, `tree_paths`, `TreeError`;
* `references` — `Reference`, `as_references`, `references_from_dag`, `chunk_references`;
* `method` — the model calls and the rule: `build_tree`, `check_path`, `aggregate`,
  `g2l_detect`, `g2l_claim`;
* `detector` — `G2LDetector`, the protocol's adapter;
* `report` — `g2l_report`, the ``veritrail-g2l-report`` JSON format.

Its prompts are the templates ``g2l_tree`` and ``g2l_check`` in `detectors/g2l/prompts/`.
"""

from __future__ import annotations

from .detector import G2LDetector
from .method import (
    CHECK_SCHEMA,
    CHECK_STEP,
    TREE_STEP,
    aggregate,
    build_tree,
    check_path,
    g2l_claim,
    g2l_detect,
    render_path,
    status_to_verdict,
)
from .records import G2LClaimOutcome, G2LConfig, G2LResult, G2LStatus, PathCheck, TreeOutcome
from .references import Reference, as_references, chunk_references, references_from_dag
from .report import REPORT_FORMAT, REPORT_VERSION, g2l_report, path_to_json
from .tree import TREE_SCHEMA, TreeError, TreeNode, parse_tree, tree_paths

__all__ = [
    "CHECK_SCHEMA",
    "CHECK_STEP",
    "REPORT_FORMAT",
    "REPORT_VERSION",
    "TREE_SCHEMA",
    "TREE_STEP",
    "G2LClaimOutcome",
    "G2LConfig",
    "G2LDetector",
    "G2LResult",
    "G2LStatus",
    "PathCheck",
    "Reference",
    "TreeError",
    "TreeNode",
    "TreeOutcome",
    "aggregate",
    "as_references",
    "build_tree",
    "check_path",
    "chunk_references",
    "g2l_claim",
    "g2l_detect",
    "g2l_report",
    "parse_tree",
    "path_to_json",
    "references_from_dag",
    "render_path",
    "status_to_verdict",
    "tree_paths",
]
