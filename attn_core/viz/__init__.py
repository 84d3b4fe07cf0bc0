"""Pictures and explorers: how the series lets you *watch* attention.

- ``plotting``   one heatmap helper for every attention array (``plot_attention``)
- ``widgets``    ipywidgets explorers (pure render functions + controls)
- ``rope``       a q/k pair rotating with its position, and the score against distance (notebook 06)
- ``mla``        bytes cached per token: MHA / GQA / MQA / MLA for any configuration (notebook 09)
- ``textpaths``  labels drawn as cached glyph outlines (what keeps grids fast to redraw)
- ``localize``   ``localize_figure``: a notebook's own matplotlib figure through the Chinese catalogs
- ``tiles``      the tile-by-tile animation of tiled attention (notebook 08)
- ``head_view``  every head of a real model on any sentence (notebook 10)
- ``sampling``   temperature, top-k and top-p on a real next-token distribution (notebook 11)
"""
