"""`orsbox eval`: a model plays an environment's tasks over ORS, k attempts each.

tasks       which tasks `--tasks` names
messages    ORS blocks and tool specs <-> chat-completions messages and tools
model       the model, through the official `openai` client, with retries
episode     one episode: the agent loop
results     the --out folder: records, transcripts, resuming
report      mean reward, pass@k, the end table
scheduler   every missing episode, `concurrency` at a time, with a progress bar
"""
