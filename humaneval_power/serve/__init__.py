"""``hepower serve``: the interactive planner in the browser (FastAPI + a plain HTML/JS page).

* :mod:`.commands` turns an API call given as JSON (the function's name and its keyword
  arguments) into the equivalent ``hepower`` command line and Python snippet, with the
  server's limits; the parser generated from the command's description validates it.
* :mod:`.jobs` runs each call in a worker process (killable: time limit, cancel) and reports
  its progress; :mod:`.worker` calls the Python API there, directly.
* :mod:`.app` is the web app: the JSON API and the page in ``static/``.

Only :mod:`.app` needs FastAPI; nothing here is imported by ``hepower --help``.
"""
