"""Run: launch a run or a batch-size sweep through the job runner and watch it live."""

from dashbench.views import run_page

run_page.show()  # its widgets live in a module, compiled once per process (see there)
