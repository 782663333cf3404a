"""What tracekit shows: the terminal views, Markdown, JSON and the HTML report of analyses and
diffs."""
