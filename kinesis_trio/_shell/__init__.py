"""The async shell: the producer's tasks, channels and waits around the core, and the
sync producer's thread.
"""
