"""What the browser tests share: opening a notebook in JupyterLab and running it, and asking its kernel."""
from __future__ import annotations

# Run every cell of the current notebook; resolves to the kernel's name once the kernel is ready.
RUN_ALL = """async () => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  await panel.context.ready;
  await panel.sessionContext.ready;
  app.commands.execute('notebook:run-all-cells');  // not awaited: it resolves only when every cell has run
  return panel.sessionContext.session.kernel.name;
}"""

# Run code in the notebook's kernel (not in a cell) and return what it printed: the kernel-side view.
IN_KERNEL = """async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const future = kernel.requestExecute({code, store_history: false});
  let out = '';
  future.onIOPub = (msg) => {
    if (msg.header.msg_type === 'stream') out += msg.content.text;
    if (msg.header.msg_type === 'error') out += msg.content.ename + ': ' + msg.content.evalue;
  };
  await future.done;
  return out;
}"""


def open_and_run(page, jupyter_lab: str, notebook: str) -> None:
    """Open `notebook` (relative to the lab's root) with a fresh layout, hide JupyterLab's news pop-ups, run all its
    cells in a Python 3 kernel."""
    page.goto(f"{jupyter_lab}/lab/tree/{notebook}?reset", timeout=90_000)
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
    page.add_style_tag(content=".jp-toast-container, .Toastify { display: none !important; }")
    assert page.evaluate(RUN_ALL) == "python3"
