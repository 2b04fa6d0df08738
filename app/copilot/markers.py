"""The citation marker syntax the prompt asks for: [3], or a group such as [1, 2] or [1; 4]."""

from __future__ import annotations

import re

MARKER_GROUP = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
