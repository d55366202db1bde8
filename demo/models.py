"""The demo app keeps no tables of its own: the simulated systems' tables are in
demo.sandbox, and the runtime's in runs and audit."""
