"""The torch bridge: capture Inductor graphs and import scheduler nodes."""

from overlapsat.torch.apply import SchedulePass, install, schedule_pass, solve_store
from overlapsat.torch.capture import Captured, capture, ensure_fake_process_group
from overlapsat.torch.importer import default_durations, import_snodes

__all__ = ["Captured", "SchedulePass", "capture", "default_durations", "ensure_fake_process_group", "import_snodes",
           "install", "schedule_pass", "solve_store"]
