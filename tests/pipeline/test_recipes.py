"""The pipeline's training stages run the SFT and RL recipes' own sections: a key means what it means in the recipe,
a key left out takes the recipe's default, and a recipe section's error names the pipeline section it came from."""

import pytest

from jaxseeker.pipeline import pipeline_config
from jaxseeker.pipeline.quick import quick_recipe
from jaxseeker.pipeline.recipes import (
    rl_config,
    rl_recipe,
    sft_config,
    sft_recipe,
    stage_sections,
    stage_seed,
    stand_in_recipes,
    write_recipe,
)
from jaxseeker.planning.recipe import rl_stages, sft_stages
from jaxseeker.train.recipe import RecipeError, read_recipe, shipped_configs
from jaxseeker.train.rl.config import RLConfig, rl_optimizer_config


def test_a_key_left_out_takes_the_recipes_own_default():
    cfg = pipeline_config({"sft": {"optimizer": {"lr": 3e-4, "warmup_steps": 2}, "train": {"steps": 8}}})
    data, optimizer, train = sft_config(cfg, "sft")
    assert (optimizer.lr, optimizer.warmup_steps, optimizer.total_steps) == (3e-4, 2, 8)
    assert (optimizer.min_lr, optimizer.weight_decay) == (1e-5, 0.1)  # OptimizerConfig's defaults
    assert (data.seq_len, data.batch_size, train.chunk_size) == (1024, 8, 512)  # DataConfig's and TrainConfig's
    recipe = sft_recipe(cfg, "sft", name="r", model={}, train_files=["t.jsonl"], tokenizer="tok", out_dir="out")
    assert recipe == {  # no data section: nothing set, nothing the pipeline adds without permute_names
        "name": "r",
        "model": {},
        "optimizer": {"lr": 3e-4, "warmup_steps": 2},
        "train": {"steps": 8, "train_files": ["t.jsonl"], "tokenizer": "tok", "out_dir": "out"},
    }
    rollouts, sampling = rl_config(cfg)
    assert (rollouts.group_size, rollouts.seed, sampling.temperature) == (8, 0, 1.0)  # RLConfig's; RL's 1.0


def test_extend_and_rft_are_the_sft_recipe_with_their_keys_laid_on():
    cfg = pipeline_config(
        {
            "sft": {"data": {"seq_len": 512, "context_weight": 0.25, "seed": 5}, "train": {"steps": 40}},
            "extend": {"data": {"seq_len": 2048, "batch_size": 2}, "train": {"steps": 30}},
            "rl": {"method": "rft"},
            "rft": {"optimizer": {"lr": 5e-4, "min_lr": 5e-4}},
        }
    )
    assert stage_sections(cfg, "extend")["data"] == {
        "seq_len": 2048,
        "context_weight": 0.25,
        "seed": 5,
        "batch_size": 2,
    }
    assert stage_sections(cfg, "rft")["train"] == {"steps": 40} and stage_sections(cfg, "sft")["optimizer"] == {}
    assert cfg.stages()[-5:] == ("sft", "extend", "eval_sft", "rl", "eval_rl")
    assert "extend" not in pipeline_config({}).stages()  # an empty extend section: no extension
    # each draws its own order: the sft's seed + 1, and + 1 + round + 10·k for fine-tune k of rft round r
    assert [stage_seed(cfg, "sft"), stage_seed(cfg, "extend"), stage_seed(cfg, "rft", 2, 1)] == [None, 6, 18]
    rft = sft_recipe(cfg, "rft", name="r", model={}, train_files=["t"], tokenizer="k", out_dir="o", seed=8)
    assert rft["data"] == {"seq_len": 512, "context_weight": 0.25, "seed": 8} and rft["optimizer"]["lr"] == 5e-4


def test_the_rl_stage_runs_the_rl_sections_with_the_pipelines_rollouts_tools_and_world():
    cfg = pipeline_config(
        {
            "world": {"size": 900},
            "eval": {"max_context": 3072, "max_tool_calls": 5},
            "tools": {"top_k": 2},
            "rl": {"rl": {"group_size": 4, "pack": True, "chunk_size": 256}, "optimizer": {"lr": 2e-4}},
        }
    )
    recipe = rl_recipe(cfg, name="r", model={"hf_path": "p"}, questions=["q.jsonl"], out_dir="o")
    assert recipe["rl"] == {"group_size": 4, "pack": True, "chunk_size": 256, "questions": ["q.jsonl"], "out_dir": "o"}
    assert recipe["optimizer"] == {"lr": 2e-4} and "sampling" not in recipe  # unset: the RL recipe's defaults
    assert (recipe["rollout"]["max_context_tokens"], recipe["rollout"]["max_tool_calls"]) == (3072, 5)
    assert (recipe["tools"]["top_k"], recipe["world"]) == (2, "synthetic:900:0")


def test_an_rl_fine_tune_that_would_inherit_the_sft_lr_is_refused():
    """rft's recipe is the sft section's with rft's laid on: without rft.optimizer.lr it would fine-tune at the SFT
    rate. pg never inherits: with no rl.optimizer it gets the RL defaults, not the SFT's or OptimizerConfig's."""
    sft = {"optimizer": {"lr": 3e-4, "min_lr": 3e-5}}
    with pytest.raises(
        RecipeError,
        match=r"^rft.optimizer.lr: not set, so the rft fine-tune would inherit the SFT "
        r"learning rate \(sft.optimizer.lr = 0.0003\)",
    ):
        pipeline_config({"sft": sft, "rl": {"method": "rft"}, "rft": {"train": {"steps": 40}}})
    cfg = pipeline_config({"sft": sft, "rl": {"method": "rft"}, "rft": {"optimizer": {"lr": 1e-5, "min_lr": 1e-5}}})
    assert sft_config(cfg, "rft")[1].lr == 1e-5
    pg = stand_in_recipes(pipeline_config({"sft": sft}))["rl"]
    assert "optimizer" not in pg  # nothing set: the RL recipe's defaults, not the SFT's
    assert rl_optimizer_config(RLConfig(), pg.get("optimizer")).lr == 1e-6


def test_an_old_key_names_where_it_lives_now():
    for section, key, new in (
        ("policy", "lr", "sft.optimizer.lr"),
        ("policy", "steps", "sft.train.steps"),
        ("policy", "copy_replay", "sft.data.copy_rate"),
        ("policy", "extend_steps", "extend.train.steps"),
        ("rl", "questions_per_step", "rl.rl.batch_questions"),
        ("rl", "temperature", "rl.sampling.temperature"),
        ("rl", "adam_eps", "rl.optimizer.eps"),
        ("rl", "rft_unlikelihood", "rft.data.unlikelihood_weight"),
    ):
        with pytest.raises(RecipeError, match=rf"^{section}\.{key}: this key is {new}"):
            pipeline_config({section: {key: 1}})
    with pytest.raises(RecipeError, match=r"^rl.steps: this key is rl.rl.steps \(rl.method pg\) or rft.train.steps"):
        pipeline_config({"rl": {"method": "rft", "steps": 3}})
    with pytest.raises(RecipeError, match=r"^rl.reward: the RL recipe's reward section; the reward function is"):
        pipeline_config({"rl": {"reward": "evidence"}})


def test_an_unknown_key_names_its_section_and_the_closest_known_one():
    with pytest.raises(RecipeError, match=r"^sft: unknown keys \['optimiser'\] \(did you mean 'optimizer'\?\)"):
        pipeline_config({"sft": {"optimiser": {"lr": 1e-3}}})
    with pytest.raises(RecipeError, match=r"^sft.data: unknown keys \['seqlen'\] \(did you mean 'seq_len'\?\)"):
        pipeline_config({"sft": {"data": {"seqlen": 512}}})
    with pytest.raises(RecipeError, match=r"^rl.rl: unknown keys \['group'\] \(did you mean 'group_size'\?\)"):
        pipeline_config({"rl": {"rl": {"group": 4}}})
    with pytest.raises(RecipeError, match=r"^rft.train: unknown keys \['step'\] \(did you mean 'steps'\?\)"):
        pipeline_config({"rl": {"method": "rft"}, "rft": {"train": {"step": 4}}})
    with pytest.raises(RecipeError, match=r"^pipeline recipe: unknown sections \['sf'\] \(did you mean 'sft'\?\)"):
        pipeline_config({"sf": {}})


def test_a_recipes_own_check_names_the_pipeline_section():
    for recipe, message in (
        ({"sft": {"train": {"steps": 5}}}, r"^sft.optimizer: OptimizerConfig: invalid \{'warmup_steps': 20\}"),
        ({"sft": {"data": {"copy_rate": 1.0}}}, r"^sft.data.copy_rate=1.0 must be in \[0, 1\)"),
        ({"extend": {"data": {"seq_len": -1}}}, r"^extend.data.seq_len=-1 must be >= 1"),
        ({"rl": {"rl": {"kl_coef": -1}}}, r"^rl.rl: kl_coef must be >= 0, got -1"),
        ({"rl": {"rl": {"advantage": "gae"}}}, r"^rl.rl: unknown advantage 'gae'"),
        ({"rl": {"reward": {"fn": "accuracy"}}}, r"^rl.reward: unknown reward function 'accuracy'"),
        ({"rl": {"optimizer": {"eps": 0.0}}}, r"^rl.optimizer: OptimizerConfig: invalid \{'eps': 0.0\}"),
        ({"rl": {"sampling": {"top_p": 0.9}}}, r"^rl.sampling: top_p=0.9, top_k=0: RL computes old log-probs"),
        ({"sft": {"data": 3}}, r"^sft: data must be a mapping \(the SFT recipe's `data` section\), got 3"),
    ):
        with pytest.raises(RecipeError, match=message):
            pipeline_config(recipe)


def test_a_key_the_pipeline_sets_is_refused():
    for recipe, key in (
        ({"sft": {"train": {"train_files": ["x.jsonl"]}}}, "sft.train.train_files"),
        ({"sft": {"data": {"name_pool": "names.tsv"}}}, "sft.data.name_pool"),
        ({"extend": {"train": {"out_dir": "elsewhere"}}}, "extend.train.out_dir"),
        ({"extend": {"data": {"seed": 3}}}, "extend.data.seed"),
        ({"rl": {"method": "rft"}, "rft": {"data": {"seed": 3}}}, "rft.data.seed"),
        ({"rl": {"rl": {"questions": ["q.jsonl"]}}}, "rl.rl.questions"),
    ):
        with pytest.raises(RecipeError, match=rf"^{key}: the pipeline sets this key; remove it$"):
            pipeline_config(recipe)


@pytest.mark.parametrize("name", ["demo", "demo_copy", "demo_focus"])
def test_a_shipped_pipelines_recipes_validate_as_the_recipe_commands_read_them(name, tmp_path):
    assert name in shipped_configs()
    cfg = pipeline_config(read_recipe(name))
    for stage, recipe in stand_in_recipes(cfg).items():
        path = write_recipe(tmp_path / stage, recipe)
        again = read_recipe(path)
        assert again == recipe  # the YAML round trip keeps every value and type
        shapes = rl_stages(again, []) if stage == "rl" else sft_stages(again)  # the checks of `jaxseeker plan`
        assert shapes and all(s.rows >= 1 for s in shapes)


def test_quick_cuts_a_recipes_mini_batches_to_divide_its_cut_step_and_sets_none_of_its_own():
    """demo.yaml's step of 24 questions × 4 episodes in 3 mini-batches becomes, under --quick, 4 × 2 in 2."""
    demo = rl_config(pipeline_config(quick_recipe(read_recipe("demo"))))[0]
    assert (demo.batch_questions, demo.group_size, demo.mini_batches) == (4, 2, 2)
    assert rl_config(pipeline_config(quick_recipe(read_recipe("demo_copy"))))[0].mini_batches == 1
