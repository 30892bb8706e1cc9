//! The presenter's last step before a result is sent: the tool's output
//! rules (the cut, the undeclared properties dropped, the `outputSchema`
//! check; see `catalog::OutputCheck`), and what a result that does not
//! conform gets under `[server] output_validation`.

use super::Pipeline;
use crate::catalog::{Mismatch, OutputCheck};
use hangar_config::OutputValidation;
use hangar_core::call::{CallError, ErrorKind, Stage, ToolResult};

impl Pipeline {
    /// Applies `check` to the result of tool `name`. Under `strict` a
    /// mismatch fails the call (stage `output`); under `warn` it is logged
    /// and the result goes on. Both count it in `/metrics`.
    pub(super) fn present(
        &self,
        name: &str,
        check: &OutputCheck,
        result: &mut ToolResult,
    ) -> Result<(), CallError> {
        let Err(Mismatch(message)) = check.apply(result) else {
            return Ok(());
        };
        self.metrics.output_invalid(name);
        match check.mode {
            OutputValidation::Strict => {
                tracing::warn!(tool = name, "result refused: {message}");
                Err(CallError::new(Stage::Output, ErrorKind::Failed, message))
            }
            OutputValidation::Warn | OutputValidation::Off => {
                tracing::warn!(tool = name, "result passed on as it is: {message}");
                Ok(())
            }
        }
    }
}
