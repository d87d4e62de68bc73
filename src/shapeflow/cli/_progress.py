"""The training commands' progress bar: the loss shows once there is one (never `nan`)."""

from __future__ import annotations


def progress_bar(console, label: str):
    """A rich Progress with `label` (a format on the task), a bar, the loss and the time."""
    from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class LossColumn(ProgressColumn):
        """`loss 2.301`, or `loss  ...` before the first step has given one."""

        def render(self, task) -> Text:
            loss = task.fields.get("loss")
            return Text("loss   ..." if loss is None else f"loss {loss:.3f}")

    return Progress(TextColumn(label), BarColumn(), LossColumn(), TimeElapsedColumn(),
                    console=console)
