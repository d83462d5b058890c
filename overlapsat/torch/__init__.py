"""The torch bridge: capture Inductor graphs, import them, and apply solved orders (docs/torch.md)."""

from overlapsat.torch.apply import SchedulePass, install, installed, schedule_pass, solve_store
from overlapsat.torch.capture import Captured, capture, ensure_fake_process_group
from overlapsat.torch.fx_apply import install_fx, installed_fx
from overlapsat.torch.importer import default_durations, import_snodes
from overlapsat.torch.installing import summary, uninstall

__all__ = ["Captured", "SchedulePass", "capture", "default_durations", "ensure_fake_process_group", "import_snodes",
           "install", "install_fx", "installed", "installed_fx", "schedule_pass", "solve_store", "summary", "uninstall"]
