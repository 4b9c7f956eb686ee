"""The sans-IO core: every decision between ``put`` and an Outcome, the time passed in
(no awaits, no I/O).
"""
