"""Pictures and explorers: how the series lets you *watch* attention.

- ``plotting``   one heatmap helper for every attention array (``plot_attention``)
- ``widgets``    ipywidgets explorers (pure render functions + controls)
- ``tiles``      the tile-by-tile animation of tiled attention (notebook 08)
- ``head_view``  every head of a real model on any sentence (notebook 09)
"""
