from orsbox import Environment, Server, tool, ToolOutput, TextBlock
from pydantic import BaseModel
import pandas as pd

# Load GSM8K tasks from parquet files
train_tasks = pd.read_parquet("train-00000-of-00001.parquet").to_dict(orient="records")
test_tasks = pd.read_parquet("test-00000-of-00001.parquet").to_dict(orient="records")

# Add IDs to tasks
for i, task in enumerate(train_tasks):
    task['id'] = str(i)
for i, task in enumerate(test_tasks):
    task['id'] = str(i)

# Tool parameter schema (must be defined before GSM8KEnvironment)
class SubmitParams(BaseModel):
    answer: str

class GSM8KEnvironment(Environment):
    """GSM8K math problem environment"""

    @classmethod
    def list_splits(cls):
        return ["train", "test"]

    @classmethod
    def list_tasks(cls, split: str):
        if split == "train":
            return train_tasks
        elif split == "test":
            return test_tasks
        raise ValueError(f"Unknown split: {split}")

    def get_prompt(self):
        question = self.task_spec["question"]
        return [TextBlock(text=question)]

    @tool
    def submit(self, params: SubmitParams) -> ToolOutput:
        """Submit your answer to the math problem"""
        # Extract the final answer from GSM8K format (after ####)
        gold_answer = self.task_spec["answer"].split("####")[-1].strip()
        user_answer = str(params.answer).strip()

        if user_answer == gold_answer:
            return ToolOutput(
                blocks=[TextBlock(text="Correct!")],
                reward=1.0,
                finished=True
            )
        else:
            return ToolOutput(
                blocks=[TextBlock(text=f"Incorrect. The answer was {gold_answer}.")],
                reward=0.0,
                finished=True
            )

# Create and run server
if __name__ == "__main__":
    server = Server([GSM8KEnvironment])
    server.run(port=8080)
