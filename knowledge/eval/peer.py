"""The simplest peer retriever, to measure ours against on the same files and questions.

What a front-end tutorial builds: the plain text of every file, read by its own extraction
(`knowledge.eval.plaintext`: other libraries than our loaders', and no choice of what is content),
cut into fixed windows of `chars` characters with `overlap`, embedded with the same embedder, cosine
top-k, nothing else. Reading for itself is the point: a passage our loaders drop is still in the
peer's windows, so the loss shows as ours below the peer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from knowledge.eval.plaintext import plain_text


@dataclass
class PeerHit:
    """One window, shaped like a retrieval hit for `knowledge.eval.evaluate`."""

    text: str
    source: str
    also_in: list[str] = field(default_factory=list)


class DenseWindows:
    """Fixed character windows, one embedding each, cosine top-k."""

    def __init__(self, root: Path, embedder, chars: int = 1000, overlap: int = 200) -> None:
        self.embedder = embedder
        self.windows: list[PeerHit] = []
        step = max(1, chars - overlap)
        for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
            text = plain_text(path)
            if not text:
                continue  # a kind it does not read, or a file it cannot
            source = path.relative_to(root).as_posix()
            self.windows += [PeerHit(text[i:i + chars], source) for i in range(0, max(1, len(text) - overlap), step)
                             if text[i:i + chars].strip()]
        self.vectors = embedder.encode([w.text for w in self.windows])

    def search(self, query: str, k: int = 5, **_) -> list[PeerHit]:
        """Top-k windows by cosine (the embedder's vectors are normalised); modes and scopes do not apply."""
        sims = self.vectors @ self.embedder.encode([query])[0]
        return [self.windows[i] for i in np.argsort(-sims)[:k]]
