"""Watch it learn (view 9): one training at a time in the background (training), its two
tasks (tasks), how long it will take (estimate), and its events streamed."""
