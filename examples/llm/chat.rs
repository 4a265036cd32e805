//! The chat template of a GGUF file (`tokenizer.chat_template`, Jinja)
//! rendered with `minijinja`, as transformers and llama-cpp-python render
//! it. Kept apart from the model code (`mod.rs`), which wgbench includes
//! without this dependency.

use crate::llm::AnyResult;

/// `template` (Jinja, as `tokenizer.chat_template`) rendered for one user
/// message and the generation prompt, as transformers'
/// `apply_chat_template(..., add_generation_prompt=True)` renders it.
pub fn render_chat(template: &str, user: &str, bos: &str, eos: &str) -> AnyResult<String> {
    let mut env = minijinja::Environment::new();
    env.add_template("chat", template)
        .map_err(|e| format!("the chat template does not parse: {e}"))?;
    let out = env
        .get_template("chat")?
        .render(minijinja::context! {
            messages => vec![minijinja::context! { role => "user", content => user }],
            add_generation_prompt => true,
            bos_token => bos,
            eos_token => eos,
        })
        .map_err(|e| format!("rendering the chat template: {e}"))?;
    Ok(out)
}
