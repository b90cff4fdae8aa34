"""Device and kernel selection, the ``gpu`` marker's skipping and the Hypothesis profiles come from
the ``jfa_verify`` pytest plugin (``jfa_verify/pytest_plugin.py``), registered as an entry point."""
