"""Sphinx settings of the course's static site (`make site`).

course_utils/tooling/site.py writes the sources into _build/src; `sphinx-build -c site` renders
them here. myst-nb shows the outputs stored in the notebooks and executes nothing. Every script,
stylesheet, font and image a page loads is served by the site itself: the theme's files, MathJax
from npm (copied into _build/src/_static/mathjax), and no widget manager from a CDN.
"""

project = "PyTorch on HPC clusters"
html_title = project
extensions = ["myst_nb"]

# The notebooks keep the outputs CI verified; nothing runs at build time.
nb_execution_mode = "off"
nb_merge_streams = True
# myst-nb would load require.js and the widget manager from CDNs for a notebook with widget
# state; the builder drops that state and shows a note where a widget stood.
nb_ipywidgets_js = {}
# `$...$` is math in a notebook's markdown, as in JupyterLab.
myst_enable_extensions = ["dollarmath", "amsmath"]
# MathJax from the site itself (relative to _static), not from Sphinx's default CDN.
mathjax_path = "mathjax/tex-chtml.js"

# The files the lesson pages link for download (student notebooks, batch scripts) are no pages.
exclude_patterns = ["_files"]
html_static_path = ["_build/src/_static"]
# The page sources hold the solutions' outputs; the site offers the student notebook instead.
html_copy_source = False
html_show_sourcelink = False
html_show_sphinx = False
html_show_copyright = False
html_theme = "sphinx_book_theme"
html_theme_options = {
    "footer_content_items": [],
    "home_page_in_toc": True,
    "navbar_persistent": [],
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
}
