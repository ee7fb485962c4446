#!/usr/bin/env python3
"""Prints a PNG's width, height and ink: the share of its pixels that differ from the top-left
corner's colour (the background). A blank image has ink 0. Used by the tests of dype's plots.

    python3 tests/scripts/png_ink.py plot.png   ->   840 459 0.0731
"""
import sys

import matplotlib.image as mpimg  # reads PNG itself (no Pillow needed)

img = mpimg.imread(sys.argv[1])
h, w = img.shape[0], img.shape[1]
background = img[0, 0]
differs = (abs(img - background) > 1e-3)
ink = differs.any(axis=-1).mean() if img.ndim == 3 else differs.mean()
print(w, h, f"{ink:.4f}")
