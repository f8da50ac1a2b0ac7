"""The debug backbone's trainer: policy loading, micro-batching, logprobs, updates, checkpoints, export.

    policy = load_policy(cfg.model)                       # the one model the engine also samples from
    optimizer = build_optimizer(policy.model.parameters(), cfg.trainer)
    scheduler = build_scheduler(optimizer, cfg.trainer)
    stats = train_step(policy, optimizer, scheduler, samples, advantages, cfg.trainer, grpo=cfg.grpo)
    save_checkpoint(run_dir, step, policy, optimizer, scheduler, {"data_position": ...})
"""

# Nothing is imported here: `ajet.trainer.sft_data` (data parsing, also read by the swift and
# llamafactory backbones) must stay importable without torch. Import from the submodules.
