"""What a run would do, without doing it: renders of the real plays (render) and the object-level plan (object_plan)."""
